"""doi_metadata for a catalogue from the agencies' data files, on Spark.

Submit it with ``spark-submit`` (or Airflow's ``SparkSubmitOperator(application=...)``), the
executors having ``airflow-doi[spark]`` installed and the data files at a path every executor
can read::

    spark-submit --master yarn examples/spark/snapshot_metadata.py \\
        --snapshot "/data/crossref/April 2025 Public Data File from Crossref.tar" \\
        --snapshot /data/datacite/DataCite_Public_Data_File_2024.tar \\
        --catalogue library.catalogue --output library.doi_metadata

``--catalogue`` and ``--output`` are tables of the session's catalog, or Parquet paths (a
name ending in ``.parquet``). The catalogue needs a ``doi_key`` column (the normalize step's;
``--key-column`` names another) and, for the DOI each row carries, ``doi``.
"""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession

from airflow_doi.spark import snapshot_metadata


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshot", action="append", required=True, metavar="PATH")
    parser.add_argument("--catalogue", required=True, help="a table, or a .parquet path")
    parser.add_argument("--output", required=True, help="a table, or a .parquet path")
    parser.add_argument("--key-column", default="doi_key")
    args = parser.parse_args()
    spark = SparkSession.builder.appName("airflow-doi snapshot_metadata").getOrCreate()
    catalogue = (spark.read.parquet(args.catalogue) if args.catalogue.endswith(".parquet")
                 else spark.table(args.catalogue))
    metadata = snapshot_metadata(spark, args.snapshot, catalogue, key_column=args.key_column)
    if args.output.endswith(".parquet"):
        metadata.write.mode("overwrite").parquet(args.output)
    else:
        metadata.write.mode("overwrite").saveAsTable(args.output)
    spark.stop()


if __name__ == "__main__":
    main()
