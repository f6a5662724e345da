"""Channel tests: the web page (app, auth, a real headless Chromium) and Telegram (against a fake Bot API)."""
