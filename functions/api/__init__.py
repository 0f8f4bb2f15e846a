"""The HTTP API: FastAPI app, served by Mangum on Lambda and by uvicorn on one machine."""
