"""What a session keeps and gives out: the session store, the reports built from it, redaction and pseudonyms."""
