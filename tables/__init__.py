"""What people read in a terminal and in a report: rich tables and markdown of runs,
aggregates, limits, verdicts and the regression gate. benchctl prints them and the HTML
reports embed them (the Function App ships this package, not the CLI)."""
