"""Tests of headwater.devservers: the throwaway database servers the tests run."""
