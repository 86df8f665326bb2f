An unmatched bracket is rejected before the run
+[ [ - ]
