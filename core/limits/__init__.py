"""Published limits of Azure storage targets and VM sizes, each citing its public source
(a versioned catalogue: core.limits.sources.CATALOGUE_VERSION)."""
