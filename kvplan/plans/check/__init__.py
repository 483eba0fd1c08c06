"""Plan files, the assertion language, the metric registry, kvplan check and kvplan sweep."""
