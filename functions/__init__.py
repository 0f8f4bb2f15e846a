"""Lambda function code. Asset root equals import root: ``functions.api.handler.lambda_handler``."""
