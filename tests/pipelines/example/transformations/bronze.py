from pyspark import pipelines as dp
from pyspark.sql import SparkSession

spark = SparkSession.active()


@dp.materialized_view(comment="every order, as the files hold them")
def bronze_orders():
    return spark.read.format("parquet").load(spark.conf.get("shop.orders"))


@dp.materialized_view
def bronze_customers():
    return spark.read.parquet(spark.conf.get("shop.customers"))
