"""What every role shares: frames, messages, labels, ids, session-log records, the home and its
layout, durable files, config reading, and escaping for owner display (DESIGN sections 2-5 and 10).

Each role imports only this package and itself (a test enforces it).
"""
