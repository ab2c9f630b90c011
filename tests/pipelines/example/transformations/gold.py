from pyspark import pipelines as dp
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

spark = SparkSession.active()


@dp.materialized_view
def gold_regions():
    return (
        spark.read.table("silver_orders")
        .groupBy("region")
        .agg(
            F.sum("amount").alias("revenue"),
            F.count("*").alias("orders"),
            F.max("qty").alias("max_qty"),
        )
    )


@dp.materialized_view
def gold_region_best():
    w = Window.partitionBy("region").orderBy(F.desc("amount"), F.asc("order_id"))
    return (
        spark.read.table("silver_orders")
        .withColumn("rank", F.row_number().over(w))
        .filter(F.col("rank") <= 2)
        .select("region", "rank", "order_id", "amount")
    )


@dp.materialized_view
def gold_top_customers():
    return (
        spark.read.table("silver_orders")
        .groupBy("customer_id")
        .agg(F.sum("amount").alias("spent"))
        .orderBy(F.desc("spent"), F.asc("customer_id"))
        .limit(3)
    )
