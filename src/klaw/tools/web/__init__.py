"""Reading the web: `web_fetch` behind an address guard, and `web_search` through a configured provider."""
