"""klaw's own tool groups (groups.py) and the tools of time and of files inside the agent's workspace."""
