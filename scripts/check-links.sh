#!/usr/bin/env bash
# The relative links of the Markdown documents (README.md and docs/**/*.md, or the files given):
# each must name a file or directory that exists, and a `#heading` anchor — in the same page or
# after a page's name — one of that page's headings, as GitHub makes them (lower case, what is not
# a letter, a digit, a space, a hyphen or an underscore dropped, spaces turned into hyphens, a
# repeated heading suffixed -1, -2 …). Links with a scheme (https:, mailto:) and those inside code
# (`…` and fenced blocks) are not looked at. `make lint` runs it.
# Usage: scripts/check-links.sh [FILE.md…]   Exit 0 when every link resolves, 1 listing each one
# that does not.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
    mapfile -d '' files < <({ printf '%s\0' README.md; find docs -name '*.md' -print0; } | LC_ALL=C sort -z)
    set -- "${files[@]}"
fi
exec perl -CSDA -e '
use strict;
use utf8;
use warnings;
use File::Basename qw(dirname);
use File::Spec;

# The anchors of a page, as GitHub makes them from its headings.
my %anchors;
sub anchors {
    my ($file) = @_;
    return $anchors{$file} if $anchors{$file};
    my %seen;
    my %set;
    open(my $in, "<:encoding(UTF-8)", $file) or return $anchors{$file} = {};
    my $fenced = 0;
    while (my $line = <$in>) {
        if ($line =~ /^\s*(```|~~~)/) { $fenced = !$fenced; next }
        next if $fenced;
        next unless $line =~ /^#{1,6}\s+(.*?)\s*#*\s*$/;
        my $slug = lc $1;
        $slug =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;      # a link in a heading: its text
        $slug =~ s/[^\p{L}\p{M}\p{N}\p{Pc} -]//g;
        $slug =~ s/ /-/g;
        my $n = $seen{$slug}++;
        $set{$n ? "$slug-$n" : $slug} = 1;
    }
    close($in);
    return $anchors{$file} = \%set;
}

my $failures = 0;
for my $file (@ARGV) {
    open(my $in, "<:encoding(UTF-8)", $file) or do { print STDERR "links: cannot read $file\n"; $failures++; next };
    my $fenced = 0;
    my $number = 0;
    while (my $line = <$in>) {
        $number++;
        if ($line =~ /^\s*(```|~~~)/) { $fenced = !$fenced; next }
        next if $fenced;
        $line =~ s/`[^`]*`//g;                       # inline code is not a link
        while ($line =~ /\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g) {
            my $target = $1;
            next if $target =~ /^[a-zA-Z][a-zA-Z0-9+.-]*:/;   # https:, mailto:
            my ($path, $anchor) = $target =~ /^([^#]*)(?:#(.*))?$/;
            my $resolved = $path eq "" ? $file : File::Spec->catfile(dirname($file), $path);
            if ($path ne "" && !-e $resolved) {
                print STDERR "$file:$number: links to $path, which does not exist — fix the path or the link\n";
                $failures++;
                next;
            }
            next unless defined $anchor && $anchor ne "";
            next if -d $resolved || $resolved !~ /\.md$/;
            unless (anchors($resolved)->{$anchor}) {
                print STDERR "$file:$number: links to #$anchor in $resolved, which has no such heading — fix the anchor or the heading\n";
                $failures++;
            }
        }
    }
    close($in);
}
if ($failures) {
    print STDERR "links: $failures broken link(s)\n";
    exit 1;
}
' "$@"
