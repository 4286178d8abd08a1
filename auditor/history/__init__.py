"""Release history: many releases of a project scanned (:mod:`.engines`: a local process pool or
Ray), listed from the package index (:mod:`.releases`) and joined gate by gate (:mod:`.timeline`)
into one :class:`~.timeline.History` that the history reports render."""
