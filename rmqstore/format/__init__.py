"""Bytes and values, no files: the field tables (layout), a record's encoding and decoding, the flags
and properties, a segment's walk over a buffer, the dump's JSON form.
"""
