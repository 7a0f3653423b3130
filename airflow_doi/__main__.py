import sys

from airflow_doi.cli import main

sys.exit(main())
