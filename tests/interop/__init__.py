"""The interop tier: rmqstore against the real Apache RocketMQ 4.9.8 (see conftest.py and rmqjava.py)."""
