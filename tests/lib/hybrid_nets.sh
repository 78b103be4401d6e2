# Sourced by the hybrid tests (not run), after check.sh ($tmp): net NAME
# BODY writes $tmp/NAME.cfg, a network of 8x8x1 inputs, batch 13, ending in
# softmax; convfc.cfg is one made here: a convolution, then fully connected
# layers of 37 and 3 neurons (neither divides evenly over 2, 3 or 4) with a
# dropout between them.

net() {
    printf '[net]\nbatch=13\nchannels=1\nheight=8\nwidth=8\nlearning_rate=0.05\nmomentum=0.9\ndecay=0.0005\nmax_batches=20\n\n%s\n[softmax]\n' "$2" >"$tmp/$1.cfg"
}
net convfc '[convolutional]
filters=4
size=3
stride=1
pad=1
activation=relu

[connected]
output=37
activation=relu

[dropout]
probability=0.3

[connected]
output=3
activation=linear
'
