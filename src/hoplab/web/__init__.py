"""`hoplab serve`: a read-only web dashboard over a store (runs, run pages, compare, trend)."""
