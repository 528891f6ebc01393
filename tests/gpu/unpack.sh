# gpu_build/ came with folders packed (tests/gpu/run.sh build: the carried tree must stay under the device
# tool's 64 MiB): each tar.xz unpacked in place once, with Python's tarfile (the GPU machine has no xz
# tool of its own for sure). Run by every script that reads gpu_build/ on the GPU machine.
B=${1:-gpu_build}
for t in ops dirs checks; do
	[ -f "$B/$t.tar.xz" ] && [ ! -f "$B/.$t.unpacked" ] || continue
	python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$B/$t.tar.xz" "$B" &&
		touch "$B/.$t.unpacked" || exit 1
done
