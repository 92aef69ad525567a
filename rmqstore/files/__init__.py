"""A store's files: one mapped file and a queue of them, their space, the names of a store's folders
and files, what a folder holds and the sizes its files show, the lock, the checkpoint, read-only
maps a bounded number at a time.
"""
