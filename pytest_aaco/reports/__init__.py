"""Reports of a pytest-aaco session: terminal summary, session bundle, JUnit, GitHub job summary, HTML."""
