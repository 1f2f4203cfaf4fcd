"""running"""
