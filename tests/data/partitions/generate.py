#!/usr/bin/env python3
"""tests/data/partitions/generate.py - write the partition file corpus.

    tests/data/partitions/generate.py [DIR]   (default: this directory)

Each NN-what.conf is one admin partitions.conf, composed from the grammar of
opensm(8) PARTITION CONFIGURATION (headers, flags, members, keywords,
memberships, mgid lines, comments, continuation lines, several definitions
per line, repeated PKeys) and from how OpenSM 3.3.23's reader really works
(its fgets() line buffer, which it reads past after "mgid=GID;" and a lone
';': what an earlier, longer line left there decides its verdict). GUIDs are
the fabric lab's ports (tests/lab/fabric/fabric-lab.sh up --hosts 2 --vfs 0)
plus a few that are not on the fabric.

tests/lab/fabric/test-partition-conformance.sh runs every file through the
real OpenSM and through ibvf's parser and compares verdicts and P_Key
tables; with --record it rewrites opensm-3.3.23.txt, which the unit test
test_partition_conf replays without a lab. Deterministic: no randomness.
"""
import os
import sys

SM, PF0, H1, H2 = ("0x0002c90300001001", "0x0002c90300002001",
                   "0x0002c90300010101", "0x0002c90300010201")
OFF = "0x0002c903000a0001"  # not on the fabric
DEF = "Default=0x7fff, ipoib : ALL=full ;\n"

cases = []


def case(what, text):
    cases.append((what, text.encode() if isinstance(text, str) else text))


# --- headers (opensm(8): PartitionName[=PKey][,flag[=value]]...) --------
case("classic", DEF)
case("header-spaces", "Default = 0x7fff , ipoib : ALL = full ;\nt1 = 0x0a01 : %s = full ;\n" % H1)
case("pkey-only-header", DEF + "0x0a02 : %s=full, %s ;\n" % (H1, H2))
case("decimal-and-octal-pkeys", DEF + "dec=2563 : %s=full ;\noct=05003 : %s=full ;\n" % (H1, H2))
case("flags-all", DEF + "t=0x0a03, ipoib, mtu=4, rate=7, sl=0, scope=2, Q_Key=0x1234, "
     "TClass=3, indx0 : %s=full ;\n" % H1)
case("flag-prefixes-and-unknown", DEF + "t=0x0a04, ip, m=4, r=3, bogus, defm=full : %s, %s=limited ;\n"
     % (H1, H2))
case("defmember-full", DEF + "t=0x0a05, defmember=full : %s, %s=limited, ALL_SWITCHES ;\n" % (H1, H2))
case("defmember-limited-keywords", DEF + "storage=0x0a06, ipoib, defmember=limited :\n"
     "\tALL_CAS, %s=full ;\n" % PF0)
case("defmember-both", DEF + "t=0x0a07, defmember=both : %s, SELF ;\n" % H1)
case("defmember-bad-value", DEF + "t=0x0a08, defmember=most : %s ;\n" % H1)
case("empty-name", DEF + "=0x0a09 : %s=full ;\n" % H1)
case("name-without-pkey", DEF + "noname : %s=full ;\n" % H1)
case("pkey-with-full-bit", DEF + "t=0x8a0a : %s=full ;\n" % H1)
case("pkey-over-16-bits", DEF + "t=0x18a0b : %s=full ;\n" % H1)
case("pkey-plus-sign", DEF + "t=+0x0a0c : %s=full ;\n" % H1)
case("no-default-in-file", "t=0x0a0d : ALL=full ;\n")
case("default-limited", "Default=0x7fff : ALL=limited, SELF=full ;\nt=0x0a0e : ALL_CAS=full ;\n")

# --- members -------------------------------------------------------------
case("keywords-and-prefixes", DEF + "a=0x0b01 : ALL_C=full, SEL=limited ;\nb=0x0b02 : ALL_S=full, "
     "ALL_ROUTERS=full ;\n")
case("memberships-prefixes", DEF + "t=0x0b03 : %s=f, %s=lim, %s=b, %s=fulll ;\n" % (SM, PF0, H1, H2))
case("empty-membership", DEF + "t=0x0b04 : %s= , %s ;\n" % (H1, H2))
case("none-and-empty-entries", DEF + "t=0x0b05 :\n  %s=both,\n  , NONE,\n  %s=full;\n" % (H1, H2))
case("guid-not-on-fabric", DEF + "t=0x0b06 : %s=full, %s=full ;\n" % (OFF, H1))
case("guid-decimal", DEF + "t=0x0b07 : %d=full ;\n" % int(H1, 16))
case("guid-negative", DEF + "t=0x0b08 : -1=full, %s ;\n" % H1)
case("guid-over-64-bits", DEF + "t=0x0b09 : 0x10002c90300010101=full, %s ;\n" % H2)
case("override-order", DEF + "t=0x0b0a : ALL=limited, %s=full ;\nu=0x0b0b : %s=full, ALL=limited ;\n"
     % (H1, H1))

# --- layout ----------------------------------------------------------------
case("comments-blank-lines", "# cluster A\n\n  # indented comment\n" + DEF +
     "\n# storage\nstorage=0x0c01 : %s=full # fs1\n\t, %s ;  # end\n" % (H1, H2))
case("continuation-lines", DEF + "t=0x0c02, ipoib :\n\t%s=full,\n\t%s=limited,\n\t%s ;\n"
     % (H1, H2, PF0))
case("several-per-line", "Default=0x7fff : ALL=full; a=0x0c03 : %s=full; b=0x0c04 : SELF=full ;\n" % H1)
case("semicolon-glued", "Default=0x7fff:ALL=full;\nt=0x0c05:%s=full;\n" % H1)
case("last-without-semicolon", DEF + "t=0x0c06 : %s=full" % H1)
case("last-without-semicolon-newline", DEF + "t=0x0c07 : %s=full\n" % H1)
case("tabs-everywhere", "Default\t=\t0x7fff\t,\tipoib\t:\tALL=full\t;\nt=0x0c08\t:\t%s=full\t;\n" % H1)
case("nul-byte", DEF.encode() + b"t=0x0c09 : " + H1.encode() + b"=full ;\0 garbage\n")
case("long-comment-line", DEF + "# " + "x" * 5000 + "\n")
case("long-member-line", DEF + "t=0x0c0a : " + ", ".join([OFF] * 300) + ", %s=full ;\n" % H1)

# --- repeated definitions (man page: "merged, first name used") ----------------
case("repeated-pkey-merged", DEF + "t=0x0d01 : %s=full ;\nother=0x0d01 : %s=limited ;\n" % (H1, H2))
case("repeated-name-generated", DEF + "same : %s=full ;\nsame : %s=full ;\n" % (H1, H2))
case("repeated-override", DEF + "t=0x0d02 : ALL_CAS=limited ;\nt=0x0d02 : %s=full ;\n" % H1)

# --- mgid lines --------------------------------------------------------------
case("man-page-mgids", "Default=0x7fff,ipoib:\n"
     "        mgid=ff12:401b::0707,sl=1 # random IPv4 group\n"
     "        mgid=ff12:601b::16    # MLDv2-capable routers\n"
     "        mgid=ff12::1,sl=1,Q_Key=0xDEADBEEF,rate=3,mtu=2 # random group\n"
     "        ALL=full;\n")
case("mgid-semicolon-next-line", DEF + "t=0x0e01, ipoib : %s=full,\n\tmgid=ff12:401b::1\n\t;\n" % H1)
case("mgid-semicolon-after-longer-line", DEF + "t=0x0e02 : %s=full,\n mgid=ff12:401b::2;\n" % H1)
case("mgid-semicolon-after-short-lines", "Default=0x7fff : ALL=full ;\nt=0x0e03 :\n"
     "  ALL_CAS,\n  mgid=ff12:401b::3;\n")
case("mgid-semicolon-longest-line", "t=0x0e04 : ALL,\n      mgid=ff12:401b::4:0:0:1;\n")
case("mgid-space-semicolon-comment", DEF + "t=0x0e05 :\n  mgid=ff12::5 ; # IPv6 group\n")
case("mgid-flags-semicolon", DEF + "t=0x0e06 : %s=full,\n mgid=ff12::6,sl=1;\n" % H1)
case("mgid-then-member-same-line", DEF + "t=0x0e07 :\n\tmgid=ff12::7, %s=full\n\t%s=full ;\n"
     % (H1, H2))
case("mgid-not-multicast", DEF + "t=0x0e08 :\n\tmgid=fe80::8\n\t%s=full ;\n" % H1)
case("mgid-not-multicast-semicolon", DEF + "t=0x0e09 :\n\tmgid=fe80::9, %s=full ;\n" % H1)
case("mgid-bare", DEF + "t=0x0e0a :\n\tmgid\n\t%s=full ;\n" % H1)
case("mgid-empty-gid", DEF + "t=0x0e0c :\n\tmgid=\n\t%s=full ;\n" % H1)

# --- a lone ';' --------------------------------------------------------------
case("lone-semicolon-after-longer-line", DEF + "t=0x0f01 :\n  %s=full,\n  %s=full\n;\n" % (H1, H2))
case("tab-semicolon-after-longer-line", DEF + "t=0x0f02 : %s=full,\n\tSELF=full\n\t;\n" % H1)
case("lone-semicolon-after-short-line", DEF + "t=0x0f03 :\nSELF\n\t;\n")
case("lone-semicolon-text-after", DEF + "t=0x0f04 : %s=full,\n; SELF=full ;\n" % H1)

# --- the realistic admin file of issue 15 --------------------------------------
case("realistic-admin-file",
     "# /etc/opensm/partitions.conf - maintained by the fabric team\n"
     "# Default: every port a limited member, the SM full\n"
     "Default=0x7fff, ipoib, mtu=5 : ALL=limited, SELF=full ;\n"
     "\n"
     "# storage: servers full, compute nodes limited\n"
     "storage=0x0a30, ipoib, defmember=limited :\n"
     "\t%s=full, %s=full,   # fs1, fs2\n"
     "\tALL_CAS ;\n"
     "# mgmt, defined twice (merged by OpenSM)\n"
     "mgmt=0x0a40, defmember=full : SELF, %s=both ;\n"
     "mgmt=0x0a40 : %s ;\n"
     "# IPoIB groups\n"
     "ipoib_grp=0x0a50, ipoib :\n"
     "\t%s=full,\n"
     "\t\tmgid=ff12:401b:8a50::0000:0000:0001:0001;\n" % (PF0, H1, H1, H2, H2))

# the same with the mgid line the longest so far: OpenSM reads unwritten bytes
case("realistic-admin-file-mgid-longest",
     "# partitions.conf\n"
     "Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n"
     "storage=0x0a31, ipoib, defmember=limited :\n"
     "\t%s=full, ALL_CAS ;\n"
     "mgmt=0x0a41, defmember=full : SELF ;\n"
     "mgmt=0x0a41 : %s=both ;\n"
     "ipoib_grp=0x0a51, ipoib : %s=full,\n"
     "                mgid=ff12:401b:8a51:0000:0000:0000:0000:0001;\n" % (PF0, H1, H2))
# and after a line whose bytes past the mgid line's end are white space
case("realistic-admin-file-mgid-after-blanks",
     "Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n"
     "ipoib_grp=0x0a52, ipoib : %s=full,\n"
     "                                                   \n"
     "\tmgid=ff12:401b:8a52::1;\n" % H2)
case("mgid-then-members-next-line", DEF + "t=0x0e0b :\n\tmgid=ff12::b\n\tSELF=full ;\n")

# --- what OpenSM rejects ---------------------------------------------------------
case("bad-guid", DEF + "t=0x1001 : %s=full, 0xZZZZ=full ;\n" % H1)
case("zero-guid", DEF + "t=0x1002 : 0x0=full ;\n")
case("bad-pkey", DEF + "t=0x1g : ALL ;\n")
case("equals-without-pkey", DEF + "t= : ALL ;\n")
case("missing-colon", "Default=0x7fff ALL=full ;\n")
case("header-split", "Default=0x7fff,\n ipoib : ALL=full ;\n")
case("lower-case-keyword", "Default=0x7fff : all=full ;\n")
case("two-colons", DEF + "ShareIO = 0x80 : defmember=limited : %s, %s=full;\n" % (H1, H2))
case("crlf", "Default=0x7fff : ALL=full ;\r\n")
case("crlf-inside", "Default=0x7fff : ALL=full\r ;\n")
case("only-comments", "# nothing yet\n\n")
case("empty", "")
# OpenSM parses a leftover ": ALL=full" as a new (generated, open) partition
case("leftover-parsed-as-definition", "Default=0x7fff : ALL=full ;\ntenant=0x10 :\n"
     "  0x0002c90300001002=full : ALL=full,\n\tmgid=ff12:401b::0707 ;\n")
# after an mgid entry whose GID is not multicast OpenSM parses the rest of
# the segment as a new definition
# a lone ';' before a comment: OpenSM parses the comment's text
case("lone-semicolon-comment", DEF + "t=0x0f05 : SELF=full\n; # end of t\n")
case("lone-semicolon-comment-definition", DEF + "t=0x0f06 : SELF=full\n; # y=0x0f07 : ALL=full\n")
case("non-multicast-mgid-then-definition", DEF + "t=0x0e0d :\n\tmgid=fe80::d, x=0x0e0e : SELF=full ;\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for old in os.listdir(out):
        if old.endswith(".conf"):
            os.unlink(os.path.join(out, old))
    for i, (what, text) in enumerate(cases, 1):
        with open(os.path.join(out, "%02d-%s.conf" % (i, what)), "wb") as f:
            f.write(text)
    print("%d files in %s" % (len(cases), out))


if __name__ == "__main__":
    main()
