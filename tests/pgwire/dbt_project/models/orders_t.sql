{{ config(materialized='table') }}
select id, amount * 2 as doubled{{ var('extra_column', '') }} from {{ ref('orders_v') }}
