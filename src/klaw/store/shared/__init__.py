"""What the SQLite and PostgreSQL backends share: the backend-neutral rules (row mapping, record kinds,
search scopes, migrations) and SQL that differs only in its placeholders, so a rule is changed in one
place and both backends keep only their dialect."""
