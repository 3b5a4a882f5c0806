#!/bin/sh
# Reserves stock for an order and prints the reserved items as JSON.
echo "reserve $1" >> "$LEDGER"
echo '{"items": [{"sku": "book"}, {"sku": "lamp"}, {"sku": "mug"}]}'
