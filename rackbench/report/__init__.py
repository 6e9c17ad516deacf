"""What a run shows people: the summary and junit properties, report.md, points.csv, plots and report.html."""
