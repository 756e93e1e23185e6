"""The plot kinds and file formats, apart from the plotting code, so that the command
line can list them without importing matplotlib (a third of a second)."""

KINDS = ("timeseries", "cdf", "box", "bars", "ping", "cpu", "timeline", "throughput",
         "tcpinfo")
# Kinds that draw one run; the others compare several.
SINGLE_RUN = ("timeseries", "ping", "cpu", "tcpinfo")
FORMATS = (".png", ".svg", ".pdf")
