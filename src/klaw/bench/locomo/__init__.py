"""Retrieval quality on LoCoMo-format data: evidence recall of the product's real memory path."""
