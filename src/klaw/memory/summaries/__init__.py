"""Summaries of exchanges and segments, written in the background by the summarization model."""
