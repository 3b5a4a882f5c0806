#!/bin/sh
# Ships one item; fails for the lamp when asked to (to show compensation).
if [ "$2" = "1" ] && [ "$1" = "lamp" ]; then
  echo "carrier rejected $1" >&2
  exit 4
fi
echo "ship $1" >> "$LEDGER"
echo "shipped $1"
