"""The web console tests: a package, so its package-scoped fixtures (broker, browser) end with it."""
