"""The operator CLI: parse, call the services, render. No logic of its own."""
