"""The runner: claims tasks, runs packages in an isolated backend, reports results."""
