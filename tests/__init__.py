"""headwater's tests, laid out like the package; shared fixtures in conftest.py, helpers in *_support.py."""
