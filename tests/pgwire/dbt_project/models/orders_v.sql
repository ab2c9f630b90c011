select id, amount from {{ source('raw', 'raw_orders') }} where amount > 0
