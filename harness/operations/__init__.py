"""What is this call: tool classification, key fields, schema defaults, operation identity, names."""
