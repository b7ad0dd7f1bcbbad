#!/usr/bin/python3
"""Lists the functions longer than a limit (60 lines) in the tracked C and C++ sources; fails
when there is one outside the benchmarks.

How it works: universal-ctags reads every tracked .h/.cc/.c/.cpp file and reports each function
with its first and last line; a function's length is last - first + 1, lambdas counted in the
function that holds them. Files under bench/ or a component's bench/ folder are left out.

  function_length.py SOURCE_DIR [--limit N] [--all]   (--all: benchmarks too)
"""
import argparse
import json
import subprocess
import sys


def tracked_sources(root):
    out = subprocess.run(['git', '-C', root, 'ls-files', '-co', '--exclude-standard',
                          '*.h', '*.cc', '*.c', '*.cpp'],
                         capture_output=True, text=True, check=True).stdout
    return [f for f in out.split() if not f.startswith('build')]


def functions(root, files):
    out = subprocess.run(['ctags', '--output-format=json', '--fields=+neZ', '--kinds-c++=f',
                          '--kinds-c=f', '-o', '-'] + files,
                         cwd=root, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get('_type') != 'tag' or 'end' not in tag or tag['name'].startswith('__anon'):
            continue
        yield tag['end'] - tag['line'] + 1, tag['path'], tag['line'], tag['name']


def is_benchmark(path):
    return path.startswith('bench/') or '/bench/' in path


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('root')
    parser.add_argument('--limit', type=int, default=60)
    parser.add_argument('--all', action='store_true')
    args = parser.parse_args()
    long = sorted((f for f in functions(args.root, tracked_sources(args.root))
                   if f[0] > args.limit and (args.all or not is_benchmark(f[1]))), reverse=True)
    for length, path, line, name in long:
        print(f'{path}:{line}: {name} has {length} lines (the limit is {args.limit}): split it '
              'into named steps')
    print(f'{len(long)} function(s) over {args.limit} lines'
          + ('' if args.all else ' outside the benchmarks'))
    return 1 if long else 0


if __name__ == '__main__':
    sys.exit(main())
