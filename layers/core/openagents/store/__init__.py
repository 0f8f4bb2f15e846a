"""The store port and its DynamoDB adapter."""
