"""HTML reports of runs and series (Plotly charts, self-contained pages) and the read-only
web UI's pages. No Azure SDK here: the data comes through the service's own views."""
