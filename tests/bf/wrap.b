Cells wrap both ways
zero minus one is 255 and 255 plus one is zero
-  writes 255
.
+  writes zero
.
[-]  the cell is zero again so the loop is skipped
---  writes 253
.
++++  writes one
.
