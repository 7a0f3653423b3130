"""``python -m airflow_doi``: the ``airflow-doi`` command line."""

import sys

from airflow_doi.cli import main

sys.exit(main())
