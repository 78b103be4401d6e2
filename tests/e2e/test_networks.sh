#!/bin/sh
# The ImageNet networks of data/ (alexnet-bn, vgg19, vgg16, resnet50,
# googlenet; alexnet.cfg is the anchors'): each cfg's parameter count and
# forward GFLOP per image, as --dry-run prints them, against the published
# network's worked out by hand below (learned parameters: weights, biases,
# batch-norm scales and shifts, not running statistics; GFLOP: 2 x the
# multiply-adds of the convolutions and inner products). A wrong filter
# count, stride, group, padding or pooling changes one of the two, and the
# check fails.
# usage: sh tests/e2e/test_networks.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
data=$(cd "$(dirname "$0")/../../data" && pwd)

# AlexNet-BN (Caffe's bvlc_alexnet, groups 2 on conv2, conv4, conv5; BN on
# conv1 and conv2). Parameters, weights + biases:
#   conv1  96 x 3 x 11 x 11 + 96         =     34,944
#   conv2 256 x 48 x 5 x 5 + 256         =    307,456
#   conv3 384 x 256 x 3 x 3 + 384        =    885,120
#   conv4 384 x 192 x 3 x 3 + 384        =    663,936
#   conv5 256 x 192 x 3 x 3 + 256        =    442,624
#   fc6   9216 x 4096 + 4096             = 37,752,832
#   fc7   4096 x 4096 + 4096             = 16,781,312
#   fc8   4096 x 1000 + 1000             =  4,097,000
#   bvlc_alexnet                           60,965,224
#   + BN scales of conv1 and conv2 (their biases become BN shifts):
#     96 + 256 = 352                  ->   60,965,576
# Multiply-adds, outputs x fan-in:
#   conv1 55 x 55 x 96 x 363   = 105,415,200
#   conv2 27 x 27 x 256 x 1200 = 223,948,800
#   conv3 13 x 13 x 384 x 2304 = 149,520,384
#   conv4 13 x 13 x 384 x 1728 = 112,140,288
#   conv5 13 x 13 x 256 x 1728 =  74,760,192
#   fc6 + fc7 + fc8 37,748,736 + 16,777,216 + 4,096,000 = 58,621,952
#   total 724,406,816 -> 1.449 GFLOP
check "alexnet-bn.cfg: 60965576 parameters, 1.449 GFLOP" out 0 \
    "60965576 parameters, 1.449 GFLOP forward per image" -- "$bin" --dry-run "$data/alexnet-bn.cfg"

# VGG-19 (configuration E). Parameters, 3x3 convolutions in x out x 9 + out:
#   64: 1,792 + 36,928; 128: 73,856 + 147,584
#   256: 295,168 + 3 x 590,080; 512 (28x28): 1,180,160 + 3 x 2,359,808
#   512 (14x14): 4 x 2,359,808
#   convolutions 20,024,384
#   fc6 25088 x 4096 + 4096 = 102,764,544; fc7 16,781,312; fc8 4,097,000
#   total 143,667,240
# Multiply-adds, H x W x 9 x in x out:
#   224: 86,704,128 + 1,849,688,064;  112: 924,844,032 + 1,849,688,064
#   56: 924,844,032 + 3 x 1,849,688,064;  28: 924,844,032 + 3 x 1,849,688,064
#   14: 4 x 462,422,016;  fc 102,760,448 + 16,777,216 + 4,096,000
#   total 19,632,062,464 -> 39.264 GFLOP
check "vgg19.cfg: 143667240 parameters, 39.264 GFLOP" out 0 \
    "143667240 parameters, 39.264 GFLOP forward per image" -- "$bin" --dry-run "$data/vgg19.cfg"

# VGG-16 (configuration D): VGG-19 without the third 256 and the third and
# fourth 512 convolutions of each size, 590,080 + 2 x 2,359,808 parameters
# and 1,849,688,064 + 1,849,688,064 + 462,422,016 multiply-adds fewer:
#   143,667,240 - 5,309,696 = 138,357,544 parameters
#   19,632,062,464 - 4,161,798,144 = 15,470,264,320 -> 30.941 GFLOP
check "vgg16.cfg: 138357544 parameters, 30.941 GFLOP" out 0 \
    "138357544 parameters, 30.941 GFLOP forward per image" -- "$bin" --dry-run "$data/vgg16.cfg"

# ResNet-50 v1 (stride 2 on the first 1x1 of res3a, res4a, res5a and on
# their projection). Every convolution has BN (2 parameters per output
# channel) and no bias. Parameters:
#   conv1 7 x 7 x 3 x 64 + 128                                 =      9,536
#   stage 2, f = 64:  a 4,224 + 36,992 + 16,896 + proj 16,896  =     75,008
#                     b, c 2 x (16,512 + 36,992 + 16,896)      =    140,800
#   stage 3, f = 128: a 33,024 + 147,712 + 66,560 + 132,096    =    379,392
#                     b-d 3 x (65,792 + 147,712 + 66,560)      =    840,192
#   stage 4, f = 256: a 131,584 + 590,336 + 264,192 + 526,336  =  1,512,448
#                     b-f 5 x (262,656 + 590,336 + 264,192)    =  5,585,920
#   stage 5, f = 512: a 525,312 + 2,360,320 + 1,052,672
#                       + 2,101,248                            =  6,039,552
#                     b, c 2 x (1,049,600 + 2,360,320
#                       + 1,052,672)                           =  8,925,184
#   fc 2048 x 1000 + 1000                                      =  2,049,000
#   total 25,557,032
# Multiply-adds, H x W of the output x (sum of in x out x k x k):
#   conv1 112 x 112 x 147 x 64 = 118,013,952
#   stage 2 (56 x 56): a 3136 x 73,728 = 231,211,008; b, c 2 x 218,365,952
#   stages 3, 4, 5 (28, 14, 7): each block a 295,436,288, each other
#     block 218,365,952 (3, 5, 2 of them)
#   fc 2,048,000
#   total 118,013,952 + 231,211,008 + 3 x 295,436,288 + 12 x 218,365,952
#     + 2,048,000 = 3,857,973,248 -> 7.716 GFLOP
#   (with the stride on the 3x3, "v1.5", block a would be 372,506,624 in
#   stages 3-5: 4.089 G multiply-adds, 8.178 GFLOP)
check "resnet50.cfg: 25557032 parameters, 7.716 GFLOP" out 0 \
    "25557032 parameters, 7.716 GFLOP forward per image" -- "$bin" --dry-run "$data/resnet50.cfg"

# GoogLeNet (bvlc_googlenet without the auxiliary classifiers); every
# convolution has a bias. Parameters, in x out x k x k + out:
#   conv1 9,472; conv2/3x3_reduce 4,160; conv2/3x3 110,784
#   an inception module with input C and branches n1; r3 -> n3; r5 -> n5;
#   pool -> np: C x (n1 + r3 + r5 + np) + 9 r3 n3 + 25 r5 n5 + biases:
#     3a (192; 64; 96 -> 128; 16 -> 32; 32)        163,696
#     3b (256; 128; 128 -> 192; 32 -> 96; 64)      388,736
#     4a (480; 192; 96 -> 208; 16 -> 48; 64)       376,176
#     4b (512; 160; 112 -> 224; 24 -> 64; 64)      449,160
#     4c (512; 128; 128 -> 256; 24 -> 64; 64)      510,104
#     4d (512; 112; 144 -> 288; 32 -> 64; 64)      605,376
#     4e (528; 256; 160 -> 320; 32 -> 128; 128)    868,352
#     5a (832; 256; 160 -> 320; 32 -> 128; 128)  1,043,456
#     5b (832; 384; 192 -> 384; 48 -> 128; 128)  1,444,080
#   fc 1024 x 1000 + 1000 = 1,025,000
#   total 6,998,552
# Multiply-adds, H x W x the same sums without biases:
#   conv1 118,013,952; conv2 56 x 56 x (64 x 64 + 9 x 64 x 192) = 359,661,568
#   3a 128,049,152; 3b 304,267,264 (28 x 28)
#   4a 73,608,192; 4b 87,908,352; 4c 99,850,240; 4d 118,515,712;
#   4e 169,996,288 (14 x 14)
#   5a 51,079,168; 5b 70,697,984 (7 x 7); fc 1,024,000
#   total 1,582,671,872 -> 3.165 GFLOP
check "googlenet.cfg: 6998552 parameters, 3.165 GFLOP" out 0 \
    "6998552 parameters, 3.165 GFLOP forward per image" -- "$bin" --dry-run "$data/googlenet.cfg"

# Its inception modules concatenate 256, 480, 512, 512, 512, 528, 832, 832
# and 1024 channels (the sums of their branches) and the 3x3/1 max pools
# keep the size; the global average pool sees 7 x 7 x 1024.
check "googlenet.cfg: inception 5b gives 7 x 7 x 1024" out 0 \
    "  108 avg                        7 x   7 x1024   ->  1024" -- "$bin" --dry-run "$data/googlenet.cfg"

finish test_networks.sh
