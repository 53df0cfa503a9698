"""Units: nats (what cross-entropy gives) to bits (what every score reports), by one constant.

Every nats -> bits conversion in tinygpt divides by ``LN2`` from here, so a loss logged in bits, a bits-per-byte
score and a per-token cost can never disagree by a differently rounded log 2.
"""

import math

LN2 = math.log(2.0)  # nats per bit
