"""The one-machine runtime: moto's DynamoDB server, the dev server and the CLI.

Never shipped in a Lambda layer; never imports ``functions`` (it loads the API by name).
"""
