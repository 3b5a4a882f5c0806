#!/bin/sh
# Reserves stock for an order and prints the reserved items as JSON.
# The ledger is this example's record of side effects: each run starts a new one.
echo "reserve $1" > "$LEDGER"
echo '{"items": [{"sku": "book"}, {"sku": "lamp"}, {"sku": "mug"}]}'
