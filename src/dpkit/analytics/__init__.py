"""Private analytics over tables: sessions, the query builder, the plan and its engines."""
