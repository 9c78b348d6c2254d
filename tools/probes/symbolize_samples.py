#!/usr/bin/env python3
"""Turns host_sampler.hpp's samples into the functions that took the time.

Usage: symbolize_samples.py FILE [top=40]

FILE holds one sample per line (return addresses, innermost first), FILE.maps the process's mappings. Each address
is named by the nearest symbol at or below it in its module's symbol table (`nm`, so that local symbols of
unstripped binaries count; stripped libraries such as libcuda name their nearest exported symbol, or the module).
Prints the innermost function of each sample (self) and every function on the stack (inclusive), in percent.
"""
import bisect
import collections
import subprocess
import sys


def read_maps(path):
    maps = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 6 or 'x' not in parts[1]:
                continue
            start, end = (int(x, 16) for x in parts[0].split('-'))
            maps.append((start, end, int(parts[2], 16), parts[5]))
    return sorted(maps)


def symbols_of(module, cache):
    if module in cache:
        return cache[module]
    table = []
    for flags in (['--defined-only'], ['-D', '--defined-only']):
        try:
            out = subprocess.run(['nm', '-C', '-n'] + flags + [module], capture_output=True, text=True).stdout
        except OSError:
            out = ''
        for line in out.splitlines():
            parts = line.split(' ', 2)
            if len(parts) == 3 and parts[1].lower() in ('t', 'w'):
                table.append((int(parts[0], 16), parts[2]))
        if table:
            break
    table.sort()
    cache[module] = ([a for a, _ in table], [n for _, n in table])
    return cache[module]


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    maps = read_maps(path + '.maps')
    all_maps = []
    with open(path + '.maps') as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6:
                start, end = (int(x, 16) for x in parts[0].split('-'))
                all_maps.append((start, end, int(parts[2], 16), parts[5]))
    starts = [m[0] for m in maps]
    cache = {}
    names = {}

    def name_of(address):
        if address in names:
            return names[address]
        i = bisect.bisect_right(starts, address) - 1
        if i < 0 or address >= maps[i][1]:
            names[address] = '??'
            return '??'
        module = maps[i][3]
        addrs, syms = symbols_of(module, cache)
        bias = min(m[0] - m[2] for m in all_maps if m[3] == module)
        for candidate in (address - bias, address):
            j = bisect.bisect_right(addrs, candidate) - 1
            if j >= 0 and candidate - addrs[j] < (1 << 20):
                names[address] = syms[j][:140]
                return names[address]
        names[address] = module.split('/')[-1]
        return names[address]

    self_counts = collections.Counter()
    inclusive = collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            frames = [int(x, 16) for x in line.split()]
            # frames[0] is the handler, frames[1] the signal trampoline, frames[2] the interrupted code.
            frames = frames[2:]
            if not frames:
                continue
            total += 1
            # The interrupted address itself, not a return address: no - 1.
            named = [name_of(frames[0])] + [name_of(a - 1) for a in frames[1:]]
            self_counts[named[0]] += 1
            for n in set(named):
                inclusive[n] += 1
    print(f'# {total} samples')
    print('# self')
    for n, c in self_counts.most_common(top):
        print(f'{100.0 * c / total:6.1f}%  {n}')
    print('# inclusive')
    for n, c in inclusive.most_common(top * 2):
        print(f'{100.0 * c / total:6.1f}%  {n}')


if __name__ == '__main__':
    main()
