"""Identity (JWT claims) and the bot policy."""
